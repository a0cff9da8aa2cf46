"""UniformJobs: one set of options, many payloads, seen as the sequence of its jobs."""

from __future__ import annotations

from taskq.domain.job import NewJob, UniformJobs, with_payload


def test_a_uniform_batch_is_the_sequence_of_its_jobs() -> None:
    """Indexing, slicing and iteration give full jobs: the template with each payload."""
    template = NewJob(actor="a", priority=2, payload={"template": True})
    batch = UniformJobs(template, [{"i": 0}, {"i": 1}, {"i": 2}])
    assert len(batch) == 3
    assert batch[1].payload == {"i": 1}
    assert batch[1].priority == 2
    assert [job.payload for job in batch] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [job.payload for job in batch[1:]] == [{"i": 1}, {"i": 2}]
    assert batch[0] == NewJob(actor="a", priority=2, payload={"i": 0})


def test_with_payload_changes_only_the_payload() -> None:
    """Every other field is the template's (the same objects)."""
    template = NewJob(actor="a", queue="q", metadata={"m": 1}, tags=("t",), max_pending=3)
    job = with_payload(template, {"p": 1})
    assert job == NewJob(
        actor="a", queue="q", metadata={"m": 1}, tags=("t",), max_pending=3, payload={"p": 1}
    )
    assert job.metadata is template.metadata
