"""``python -m qa_core models|gc|users|audit``: the model registry, checkpoint garbage, the team's
users and roles, and the audit trail."""

from __future__ import annotations

import argparse
from pathlib import Path

from qa_core import config
from qa_core.checkpoints import GC_GRACE_MINUTES, collect_garbage
from qa_core.cli.common import actor, add_command, emit, open_store
from qa_core.types import InputError


def cmd_models(args: argparse.Namespace) -> None:
    from qa_core.rankers import registry

    if args.write is not None:
        if not args.table:
            raise InputError("--write writes the table: use it with --table")
        args.write.write_text(registry.with_models_table(args.write.read_text(), str(args.write)))
        emit({"written": str(args.write)})
        return
    if args.table:
        print(registry.models_table())
        return
    store = open_store(args)
    for name in registry.available():
        emit({"model": name, "versions": store.models.model_versions(name)})


def cmd_gc(args: argparse.Namespace) -> None:
    """Delete the temporary and unregistered checkpoint files that killed or failed trainings
    left in data/models (the rule: ``qa_core.checkpoints.collect_garbage``)."""
    from qa_core.services import models

    store = open_store(args)
    report = collect_garbage(
        config.checkpoint_dir(),
        owner=store.store_id,
        registered=models.checkpoints_in_use(store),
        grace_minutes=args.older_than,
        include_unmarked=args.unmarked,
        dry_run=args.dry_run,
    )
    verb = "would_delete" if args.dry_run else "deleted"
    for path in report.deleted:
        emit({verb: str(path)})
    emit({
        verb: len(report.deleted),
        "freed_bytes": report.freed_bytes,
        "kept_registered": report.registered,
        "kept_recent": len(report.recent),
        "kept_other_store": len(report.not_ours),
        "kept_unmarked": len(report.unmarked),
    })


def cmd_users_grant(args: argparse.Namespace) -> None:
    from qa_core.services import users

    user = users.grant_role(open_store(args), args.email, args.role, actor=actor())
    emit({"user": user["recorded_as"], "role": user["role"]})


def cmd_users_merge(args: argparse.Namespace) -> None:
    """One person signed in under two identities: the second becomes the first (``users.merge_users``)."""
    from qa_core.services import users

    user = users.merge_users(open_store(args), args.keep, args.merge, actor=actor())
    emit({"user": user["recorded_as"], "merged": args.merge})


def cmd_users_list(args: argparse.Namespace) -> None:
    for user in open_store(args).users.users():
        emit(user)


def cmd_audit(args: argparse.Namespace) -> None:
    """The audit trail, newest first: JSON lines, or CSV with ``--out``."""
    from qa_core.services.users import audit_csv, audit_events, audit_table

    store = open_store(args)
    if args.out:
        from qa_core.checkpoints import atomic_file

        table = audit_table(store, args.action)
        with atomic_file(args.out) as handle:
            handle.write(audit_csv(table))
        emit({"written": args.out, "events": len(table)})
        return
    for event in audit_events(store, args.action):
        emit(event)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The ``models``, ``gc``, ``users`` and ``audit`` commands."""
    models = add_command(commands, "models", cmd_models, help="registered models and their versions")
    models.add_argument("--table", action="store_true", help="print the markdown table of models (README) instead")
    models.add_argument("--write", nargs="?", type=Path, const=config.PROJECT_ROOT / "README.md", metavar="MARKDOWN",
                        help="with --table: replace the table between the model table markers of the README (or MARKDOWN)")

    gc = add_command(
        commands, "gc", cmd_gc,
        help="delete stale temporary and unregistered checkpoint files of this store in data/models",
        description=(
            "Deletes, in data/models, temporary files (.NAME.RANDOM.tmp) older than --older-than minutes, "
            "and checkpoint files marked with this store's id that none of its model versions uses, older "
            "than --older-than minutes. Never touches a registered checkpoint of this store or a file "
            "marked by another store sharing the folder; files without a store mark (older names) only "
            "with --unmarked."
        ),
    )
    gc.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    gc.add_argument("--older-than", type=float, default=GC_GRACE_MINUTES, metavar="MINUTES",
                    help=f"grace period: newer files are kept (default {GC_GRACE_MINUTES:.0f}, at least 1; a training "
                         "registers its checkpoint after evaluating it on TEST, so a short period may delete "
                         "one about to be registered)")
    gc.add_argument("--unmarked", action="store_true",
                    help="also unregistered files without a store mark: only when no other store shares the folder")


    users = commands.add_parser("users", help="the team's users and roles (team mode)").add_subparsers(
        dest="users_command", required=True
    )
    grant = add_command(users, "grant", cmd_users_grant, help="give a user who has signed in once a role: annotator, reviewer or admin")
    grant.add_argument("email", help="the user's email (or their provider subject)")
    grant.add_argument("role", help="annotator, reviewer or admin")
    add_command(users, "list", cmd_users_list, help="every user with their role")
    merge = add_command(users, "merge", cmd_users_merge, help="make two users one person (a second sign-in identity of "
                        "the same person): MERGE's identity signs in as KEEP, its labels become KEEP's")
    merge.add_argument("keep", type=int, help="the id of the user to keep (users list)")
    merge.add_argument("merge", type=int, help="the id of the user merged into KEEP")

    audit = add_command(commands, "audit", cmd_audit, help="who imported, trained, promoted, rolled back, adjudicated, changed roles")
    audit.add_argument("--action", nargs="+", default=None, help="only these actions (import, promote, rollback, ...)")
    audit.add_argument("--out", default=None, help="write CSV here instead of JSON lines")
