"""Presentation: turning format models into what people and scripts read."""
