""".NET programs sampled from outside: the runtime's diagnostics port and EventPipe.

Every CoreCLR since 3.0 listens on a Unix socket and streams its own stack samples and
events (EventPipe, in the nettrace format) to whoever asks. This package asks
(:mod:`~profkit.dotnet.ipc`), reads the stream with :mod:`profkit.formats.nettrace`
(:mod:`~profkit.dotnet.session`, :mod:`~profkit.dotnet.collector`), names the sampled
addresses (:mod:`~profkit.dotnet.methods`, :mod:`~profkit.dotnet.images`) and builds
profkit's saved call-tree profile (:mod:`~profkit.dotnet.profile`). It serves ``profkit
attach``/``top``/``dump`` on a .NET PID (:mod:`~profkit.dotnet.commands`), ``profkit run
--mode sample app.dll`` (:mod:`~profkit.dotnet.engine`) and ``profkit report/export
FILE.nettrace`` (:mod:`~profkit.dotnet.nettracefile`). Nothing is loaded into the target.
docs/clr.md is the user's guide.
"""
