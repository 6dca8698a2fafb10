"""The process of one training job: ``python -m qa_core.services.job_runner JOB_ID``.

``jobs.start_training_job`` starts it detached, with the store's URL in ``RERANK_LAB_DB`` (never
in argv, which every user can read); it runs the queued job (``jobs.run_job``) and ends. It is its
own entry point, not a command of the CLI: nothing a person types reaches it, and the job's
settings come from the store. The operator running it (``access.process_operator``), like the CLI
and the workers, claims the job and writes its progress; the version is registered, and promoted,
as the user who queued the job, with the role they hold when it finishes (``JobStore.finish_job``),
and the audit trail credits them (naming the operator that ran it).

Exit status: 0 the version is registered (one JSON line on stdout); 2 the job could not run or
failed on its input, or was cancelled meanwhile (one ``error:`` line on stderr; the job marked
failed by ``jobs.run_claimed``, except when the store cannot be opened at all: then nothing can be
written and the job stays as the store holds it); 130 interrupted; 1 a bug (its traceback goes to the job's log).
SIGTERM (a cancel from the Train page) ends it at once: the job is already marked failed, and
nothing is registered before the job's last transaction.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from db.jobs import ClaimLost
from qa_core.access import process_operator
from qa_core.types import InputError, NotTrainedError

EXIT_FAILED = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qa_core.services.job_runner",
                                     description="Run one training job queued in the store (RERANK_LAB_DB).")
    parser.add_argument("job_id", type=int, help="the job's id (its settings come from the store)")
    job_id = parser.parse_args(argv).job_id
    from qa_core.services.jobs import run_job
    from qa_core.services.store_setup import open_store

    try:  # a store it cannot open is one sentence in the job's log, as on a page or the CLI
        version_id = run_job(open_store(), job_id, actor=process_operator())
    except (InputError, NotTrainedError, ClaimLost) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(json.dumps({"job": job_id, "model_version_id": version_id}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
