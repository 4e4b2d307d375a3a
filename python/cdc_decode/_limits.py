"""The resource limits every decoder enforces (docs/events.md, "Limits"); the Rust core's
counterpart is ``rust/limits.rs``, with the same fields and defaults."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What one message may make a decoder read, nest, count and allocate.

    A message over a limit gives one error row naming the limit, its value and how to
    change it (``message is 80,000,000 bytes, over max_message_bytes = 64 MiB ...``). The
    defaults are the values the decoders had before limits could be changed or, for
    limits new with this class, values far above what real sources send. docs/events.md,
    "Limits", says why each default is what it is.

    Attributes:
        max_message_bytes: most bytes of one input value (formats of binary values).
        max_json_depth: most levels of nested JSON objects and arrays (the top value is
            level 1), in JSON messages and in the schema of an Avro file.
        max_avro_depth: most levels of nested records and arrays in an Avro datum.
        max_items: most items of one collection: members of a JSON object or array
            (duplicates included), records of an Avro file, entries of a Tencent DTS
            ``Entries``, rows and columns of one ``DMLEvent``.
        max_parts: most parts of one Tencent DTS multi-part set (``Envelope.total``).
        max_pending_bytes: most bytes of multi-part envelopes one decoder buffers, all
            open sets together.
        max_inflate_ratio: an Avro file may decompress to this many times its size ...
        inflate_floor_bytes: ... or to this many bytes, if more.
        max_output_ratio: the keys and values (``before``, ``after``, ``metadata``) of the
            events of one Avro file, or of one Tencent DTS ``Entries``, may take this many
            times its size ...
        output_floor_bytes: ... or this many bytes, if more.

    Example:
        >>> small = cdc_decode.Limits(max_message_bytes=1 << 20, max_items=10_000)
        >>> cdc_decode.decode(values, "debezium-json", limits=small)
    """

    max_message_bytes: int = 256 * MiB
    max_json_depth: int = 128
    max_avro_depth: int = 64
    max_items: int = 10_000_000
    max_parts: int = 100_000
    max_pending_bytes: int = 1 * GiB
    max_inflate_ratio: int = 64
    inflate_floor_bytes: int = 16 * MiB
    max_output_ratio: int = 256
    output_floor_bytes: int = 64 * MiB

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if type(value) is not int or not 0 < value < 1 << 63:
                raise ValueError(f"Limits.{field.name} must be a positive int, not {value!r}")

    def as_dict(self) -> dict[str, int]:
        """The limits as plain ``{name: value}``, as the Rust core takes them."""
        return dataclasses.asdict(self)

    def inflate_limit(self, size: int) -> int:
        """The most bytes a file of ``size`` bytes may decompress to, all blocks together."""
        return max(self.inflate_floor_bytes, size * self.max_inflate_ratio)

    def output_limit(self, size: int) -> int:
        """The most output bytes the events of a message of ``size`` bytes may take."""
        return max(self.output_floor_bytes, size * self.max_output_ratio)

    def over(self, name: str, what: str) -> str:
        """The error text of a message over a limit: what it has, the limit and its value,
        how to change it.

        Args:
            name: the limit, one of the fields above (``"max_items"``).
            what: what the message has (``"an array of more than 1,000 items"``).
        """
        value = getattr(self, name)
        return f"{what}, over {name} = {_show(name, value)} {_HOW}"

    def over_inflate(self, limit: int) -> str:
        """The error text of a file that decompresses to more than its inflate limit.

        Args:
            limit: the file's :meth:`inflate_limit`.
        """
        what = (
            f"the file inflates past {limit:,} bytes "
            "(max_inflate_ratio times its size, or inflate_floor_bytes if more)"
        )
        return self.over("max_inflate_ratio", what)

    def over_output(self, limit: int, whose: str) -> str:
        """The error text of a message whose events take more than its output limit.

        Args:
            limit: the message's :meth:`output_limit`.
            whose: the message as the text names it (``"the file's"``, ``"the message's"``).
        """
        what = (
            f"{whose} events take more than {limit:,} bytes "
            "(max_output_ratio times its size, or output_floor_bytes if more)"
        )
        return self.over("max_output_ratio", what)


# How an error over a limit says to change it.
_HOW = "(Decoder(limits=cdc_decode.Limits(...)))"


DEFAULT = Limits()


def as_limits(limits: Limits | None) -> Limits:
    """``limits`` checked, the defaults for ``None``."""
    if limits is None:
        return DEFAULT
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a cdc_decode.Limits, not {type(limits).__name__}")
    return limits


def _show(name: str, value: int) -> str:
    """A limit's value as the error text writes it (``64 MiB``, ``1,000``)."""
    if name.endswith("_bytes"):
        for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
            if value >= size and value % size == 0:
                return f"{value // size:,} {unit}"
    return f"{value:,}"
