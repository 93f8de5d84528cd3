"""A discriminated union on `kind` whose members are imported only when a value names them.

The scenario's `workload` (and each job of `workloads`) is one config class per workload kind,
chosen by its `kind` key. A plain pydantic union needs every member class when the scenario model
is built, i.e. every workload package imported at start-up, though a run uses one. `KindUnion` is
the same union, validated by dispatch: read `kind`, import that kind's config class
(`config_of(kind)`, sim/workloads/__init__.py's registry), validate the value with it. The user
sees the same thing: errors keep their key paths inside the member (`workload.bytes`), an unknown
or missing kind is an error at `workload.kind` listing the allowed kinds, dumps are the member's,
and the JSON schema (`dcsim schema`) is the plain union's, built when asked for.

Use: `Annotated[WorkloadBase, KindUnion(config_of, kinds)]` (type checkers see the base class).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter
from pydantic_core import core_schema
from typing_extensions import TypedDict


@dataclass(frozen=True)
class KindUnion:
    """pydantic metadata: validate a mapping by the config class its `kind` names.

    `config_of(kind)` returns the member class (None for an unknown kind); `kinds()` lists the
    kinds in the union's order (no imports)."""

    config_of: Callable[[object], type[BaseModel] | None]
    kinds: Callable[[], list[str]]

    def members(self) -> tuple[type[BaseModel], ...]:
        """Every member class (imports every kind)."""
        return tuple(typing.cast(type[BaseModel], self.config_of(kind)) for kind in self.kinds())

    def plain_union(self) -> Any:
        """The eager discriminated union of every member (for the JSON schema)."""
        members = self.members()
        if len(members) == 1:
            return members[0]
        return Annotated[typing.Union[members], Field(discriminator="kind")]  # noqa: UP007

    def _validate(self, value: Any, info: core_schema.ValidationInfo) -> Any:
        if isinstance(value, BaseModel) and type(value) is self.config_of(getattr(value, "kind", None)):
            return value
        kind = value.get("kind") if isinstance(value, dict) else None
        member = self.config_of(kind) if isinstance(kind, str) else None
        if member is None:
            self._kind_checker().validate_python(value)  # raises: not a mapping, no kind, unknown kind
        return typing.cast(type[BaseModel], member).model_validate(value, context=info.context)

    def _kind_checker(self) -> TypeAdapter:
        kind_only = TypedDict("kind_only", {"kind": Literal[tuple(self.kinds())]})  # type: ignore[misc]  # noqa: UP013
        return TypeAdapter(kind_only)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.with_info_plain_validator_function(
            self._validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda value: value, return_schema=core_schema.any_schema()
            ),
        )

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: Any) -> Any:
        return handler(TypeAdapter(self.plain_union()).core_schema)
