"""``__init__`` templates for :mod:`profkit._record` (generated: do not edit).

Made by ``scripts/gen_record_inits.py`` (see there for why); ``f0, f1, ...`` are renamed
to a record's fields. ``plain<N>`` stores attributes, ``frozen<N>`` goes through
``object.__setattr__`` past a frozen record's refusing ``__setattr__``.
"""

# mypy: allow-untyped-defs

_set = object.__setattr__
MAX_FIELDS = 20


def plain0(self):
    pass


def frozen0(self):
    pass


def plain1(self, f0):
    self.f0 = f0


def frozen1(self, f0):
    _set(self, "f0", f0)


def plain2(self, f0, f1):
    self.f0 = f0
    self.f1 = f1


def frozen2(self, f0, f1):
    _set(self, "f0", f0)
    _set(self, "f1", f1)


def plain3(self, f0, f1, f2):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2


def frozen3(self, f0, f1, f2):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)


def plain4(self, f0, f1, f2, f3):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3


def frozen4(self, f0, f1, f2, f3):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)


def plain5(self, f0, f1, f2, f3, f4):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4


def frozen5(self, f0, f1, f2, f3, f4):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)


def plain6(self, f0, f1, f2, f3, f4, f5):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5


def frozen6(self, f0, f1, f2, f3, f4, f5):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)


def plain7(self, f0, f1, f2, f3, f4, f5, f6):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6


def frozen7(self, f0, f1, f2, f3, f4, f5, f6):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)


def plain8(self, f0, f1, f2, f3, f4, f5, f6, f7):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7


def frozen8(self, f0, f1, f2, f3, f4, f5, f6, f7):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)


def plain9(self, f0, f1, f2, f3, f4, f5, f6, f7, f8):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8


def frozen9(self, f0, f1, f2, f3, f4, f5, f6, f7, f8):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)


def plain10(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9


def frozen10(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)


def plain11(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10


def frozen11(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)


def plain12(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11


def frozen12(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)


def plain13(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12


def frozen13(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)


def plain14(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12
    self.f13 = f13


def frozen14(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)
    _set(self, "f13", f13)


def plain15(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12
    self.f13 = f13
    self.f14 = f14


def frozen15(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)
    _set(self, "f13", f13)
    _set(self, "f14", f14)


def plain16(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12
    self.f13 = f13
    self.f14 = f14
    self.f15 = f15


def frozen16(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)
    _set(self, "f13", f13)
    _set(self, "f14", f14)
    _set(self, "f15", f15)


def plain17(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12
    self.f13 = f13
    self.f14 = f14
    self.f15 = f15
    self.f16 = f16


def frozen17(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)
    _set(self, "f13", f13)
    _set(self, "f14", f14)
    _set(self, "f15", f15)
    _set(self, "f16", f16)


def plain18(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12
    self.f13 = f13
    self.f14 = f14
    self.f15 = f15
    self.f16 = f16
    self.f17 = f17


def frozen18(self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)
    _set(self, "f13", f13)
    _set(self, "f14", f14)
    _set(self, "f15", f15)
    _set(self, "f16", f16)
    _set(self, "f17", f17)


def plain19(
    self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18
):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12
    self.f13 = f13
    self.f14 = f14
    self.f15 = f15
    self.f16 = f16
    self.f17 = f17
    self.f18 = f18


def frozen19(
    self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18
):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)
    _set(self, "f13", f13)
    _set(self, "f14", f14)
    _set(self, "f15", f15)
    _set(self, "f16", f16)
    _set(self, "f17", f17)
    _set(self, "f18", f18)


def plain20(
    self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19
):
    self.f0 = f0
    self.f1 = f1
    self.f2 = f2
    self.f3 = f3
    self.f4 = f4
    self.f5 = f5
    self.f6 = f6
    self.f7 = f7
    self.f8 = f8
    self.f9 = f9
    self.f10 = f10
    self.f11 = f11
    self.f12 = f12
    self.f13 = f13
    self.f14 = f14
    self.f15 = f15
    self.f16 = f16
    self.f17 = f17
    self.f18 = f18
    self.f19 = f19


def frozen20(
    self, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19
):
    _set(self, "f0", f0)
    _set(self, "f1", f1)
    _set(self, "f2", f2)
    _set(self, "f3", f3)
    _set(self, "f4", f4)
    _set(self, "f5", f5)
    _set(self, "f6", f6)
    _set(self, "f7", f7)
    _set(self, "f8", f8)
    _set(self, "f9", f9)
    _set(self, "f10", f10)
    _set(self, "f11", f11)
    _set(self, "f12", f12)
    _set(self, "f13", f13)
    _set(self, "f14", f14)
    _set(self, "f15", f15)
    _set(self, "f16", f16)
    _set(self, "f17", f17)
    _set(self, "f18", f18)
    _set(self, "f19", f19)
