"""Messages: a role and a list of parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._json_object import is_array, json_object, new_dict, new_list, optional_object, unknown_keys
from .errors import InvalidArgumentError
from .parts import Part, ReasoningPart, TextPart, ToolRequestPart, ToolResponsePart, part_from_json, part_to_json
from .records._evolve import fast_init

__all__ = ["Message", "Role", "message_from_json", "message_to_json", "messages_from_json", "messages_to_json"]

Role: TypeAlias = Literal["system", "user", "model", "tool"]
"""Who wrote a message."""


@fast_init
@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message of a conversation.

    Messages are values: the runtime never changes one in place, it replaces it. That
    lets snapshots share messages instead of copying the whole history every turn.
    """

    role: Role | str
    """``system``, ``user``, ``model`` or ``tool`` (unknown roles are kept as given)."""
    content: list[Part] = field(default_factory=new_list)
    """The parts, in order."""
    metadata: dict[str, Any] | None = None
    """Free-form metadata (a resumed tool message carries ``resumed``)."""
    extra: dict[str, Any] = field(default_factory=new_dict, repr=False)
    """Unknown wire keys, kept for a lossless round trip."""

    def to_json(self) -> dict[str, Any]:
        """This message as Genkit's camelCase JSON; :meth:`from_json` reads it back unchanged."""
        return message_to_json(self)

    @classmethod
    def from_json(cls, data: object) -> Message:
        """A message read from Genkit JSON; raises :class:`~interlock.errors.InvalidArgumentError` for bad input."""
        return message_from_json(data)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message with one text part."""
        return cls(role="user", content=[TextPart(text=text)])

    @classmethod
    def model(cls, text: str) -> Message:
        """A model message with one text part."""
        return cls(role="model", content=[TextPart(text=text)])

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message with one text part."""
        return cls(role="system", content=[TextPart(text=text)])

    @property
    def text(self) -> str:
        """All text parts joined."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def reasoning(self) -> str:
        """All reasoning parts joined."""
        return "".join(p.reasoning for p in self.content if isinstance(p, ReasoningPart))

    @property
    def tool_requests(self) -> list[ToolRequestPart]:
        """The tool request parts, in order."""
        return [p for p in self.content if isinstance(p, ToolRequestPart)]

    @property
    def tool_responses(self) -> list[ToolResponsePart]:
        """The tool response parts, in order."""
        return [p for p in self.content if isinstance(p, ToolResponsePart)]

    @property
    def interrupts(self) -> list[ToolRequestPart]:
        """Tool requests that paused the turn and wait for an answer."""
        return [p for p in self.content if isinstance(p, ToolRequestPart) and p.is_interrupt]


def message_from_json(data: object) -> Message:
    """Read one Genkit message (``{"role": ..., "content": [...]}``)."""
    d = json_object(data, "a message")
    role = d.get("role")
    if not isinstance(role, str):
        raise InvalidArgumentError("a message needs a string 'role' (system, user, model or tool)")
    content: Any = d.get("content") or []
    if not is_array(content):
        raise InvalidArgumentError("a message's 'content' must be a list of parts")
    return Message(
        role=role,
        content=[part_from_json(p) for p in content],
        metadata=optional_object(d, "metadata"),
        extra=unknown_keys(d, ("role", "content", "metadata")),
    )


def message_to_json(message: Message) -> dict[str, Any]:
    """Write one message as Genkit JSON."""
    d: dict[str, Any] = {"role": message.role, "content": [part_to_json(p) for p in message.content]}
    if message.metadata is not None:
        d["metadata"] = message.metadata
    if message.extra:
        d.update(message.extra)
    return d


def messages_from_json(data: object) -> list[Message]:
    """Read a list of messages."""
    if not is_array(data):
        raise InvalidArgumentError("messages must be a JSON list")
    return [message_from_json(m) for m in data]


def messages_to_json(messages: list[Message]) -> list[dict[str, Any]]:
    """Write a list of messages."""
    return [message_to_json(m) for m in messages]
