"""The seed mends of ``unit/test_seed_mends.py``, on PostgreSQL (this tier's ``store`` fixture)."""

from __future__ import annotations

from test_seed_mends import (
    test_a_message_with_a_resume_is_failed_precondition_as_genkit_answers,
    test_a_model_reply_with_a_lone_surrogate_is_refused_on_every_store,
    test_a_paused_snapshot_is_completed_with_finish_reason_interrupted,
    test_every_part_kind_answers_is_interrupt,
    test_interrupt_as_and_data_as_raise_invalid_argument_naming_the_field,
    test_restarting_an_interrupt_only_tool_is_refused_saying_respond,
)

__all__ = [
    "test_a_message_with_a_resume_is_failed_precondition_as_genkit_answers",
    "test_a_model_reply_with_a_lone_surrogate_is_refused_on_every_store",
    "test_a_paused_snapshot_is_completed_with_finish_reason_interrupted",
    "test_every_part_kind_answers_is_interrupt",
    "test_interrupt_as_and_data_as_raise_invalid_argument_naming_the_field",
    "test_restarting_an_interrupt_only_tool_is_refused_saying_respond",
]
