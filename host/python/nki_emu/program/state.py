"""Which side of the program split this process is on (read by the emulator's frame helpers).

``RECORDER``: the active :class:`nki_emu.program.recorder.Recorder` while an untrusted
kernel is traced, else None. ``REPLAY_LOCATION``: ``(filename, line)`` of the program
operation the trusted replayer is executing, else None; the emulator then takes the
kernel's source location from it instead of from Python frames (there are none).
"""
RECORDER = None
REPLAY_LOCATION = None


def unwrap(value):
    """The emulator object behind a recording handle (the value itself otherwise)."""
    recorder = RECORDER
    if recorder is not None:
        return recorder.unwrap(value)
    return value
