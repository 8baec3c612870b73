"""The Kryo generation of a loaded snapshot's values, set on its Kryo serializer snapshots.

Kryo 2.24 (Flink 1.x) and Kryo 5 (Flink 2.x) write fixed-width values (a lone ``Float``, ``Double``,
``Short``, ``Character``) in different byte orders, and a ``KryoSerializerSnapshot`` does not say which
wrote them. The checkpoint's ``_metadata`` version does (it follows the Flink major version): every reader
that decodes a snapshot's backend meta data or changelog states marks its Kryo snapshots through
:func:`mark_kryo_generation`, so the value decoders read the one generation that wrote the bytes.
"""

from __future__ import annotations

from typing import TypeVar

from repair.formats.flink.backend_meta import KeyedBackendMeta, OperatorBackendMeta, StateMetaInfo, set_meta_kryo_generation
from repair.formats.flink.metadata import generation_of_metadata_version
from repair.io.snapshot import LoadedSnapshot

Meta = TypeVar("Meta", KeyedBackendMeta, OperatorBackendMeta, list[StateMetaInfo])


def mark_kryo_generation(snapshot: LoadedSnapshot, meta: Meta) -> Meta:
    """``meta`` with its Kryo serializer snapshots marked with the generation of ``snapshot``'s Flink."""
    set_meta_kryo_generation(meta, generation_of_metadata_version(snapshot.metadata.version))
    return meta
