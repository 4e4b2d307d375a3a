"""The Tencent DTS message classes, built by the official protobuf runtime.

They come from the descriptor set the Rust build compiles from ``proto/subscribe.proto``
(shipped as ``fallback/subscribe.desc``), so the fallback decoder, the generator and the
Rust core read one schema, and no ``protoc`` or generated ``_pb2`` module is needed.
"""

from __future__ import annotations

from importlib.resources import files

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_descriptors = descriptor_pb2.FileDescriptorSet.FromString(
    files("cdc_decode.fallback").joinpath("subscribe.desc").read_bytes()
)
_pool = descriptor_pool.DescriptorPool()
for _file in _descriptors.file:
    _pool.Add(_file)


def _message(name: str):
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"subscribe.{name}"))


def _enum(name: str):
    return _pool.FindEnumTypeByName(f"subscribe.{name}")


Envelope = _message("Envelope")
Entries = _message("Entries")
Entry = _message("Entry")
Header = _message("Header")
Event = _message("Event")
DMLEvent = _message("DMLEvent")
RowChange = _message("RowChange")
Column = _message("Column")
Data = _message("Data")
KVPair = _message("KVPair")
BeginEvent = _message("BeginEvent")
CommitEvent = _message("CommitEvent")
DDLEvent = _message("DDLEvent")
RollbackEvent = _message("RollbackEvent")
HeartbeatEvent = _message("HeartbeatEvent")
CheckpointEvent = _message("CheckpointEvent")

DMLType = _enum("DMLType")
MessageType = _enum("MessageType")
SourceType = _enum("SourceType")
DataType = _enum("DataType")
