"""The exception hierarchy. Defined in Python so both engines raise the same classes."""


class DecodeError(ValueError):
    """A message could not be decoded and the mode is ``failfast``.

    The text names the message's ordinal in the decoder's input and the cause, for
    example ``message 17: truncated varint at byte 17 of Entries``.
    """
