"""`minitf verify EXPORT`: re-measure an export against the MiniTF folder it came from and write its "Runs in" table
(hf_minitf.verification); what it measures and the exit status are in `catalog.verification.VERIFY_DESCRIPTION`."""

from __future__ import annotations

import argparse
import json
import sys

from hf_minitf.catalog.verification import (
    EXPORT_VERIFY_NEW_TOKENS,
    EXPORT_VERIFY_PROMPTS,
    RECORD_IN_HELP,
    VERIFY_DESCRIPTION,
    VERIFY_HELP,
    VERIFY_NEW_TOKENS,
    VERIFY_PROMPTS,
)
from hf_minitf.commands.common import count, new_tokens, reports_errors

HELP = VERIFY_HELP
DESCRIPTION = VERIFY_DESCRIPTION


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "export",
        metavar="EXPORT",
        help="an export folder or GGUF file written by minitf export, or the Hub repo id of a published export",
    )
    parser.add_argument(
        "--source",
        default=None,
        metavar="FOLDER",
        help="the MiniTF folder (or Hub repo id) to measure against (default: the one the export names)",
    )
    parser.add_argument(
        "--prompts",
        type=count,
        default=VERIFY_PROMPTS,
        metavar="N",
        help=f"prompts or texts (default: {VERIFY_PROMPTS})",
    )
    parser.add_argument(
        "--new-tokens",
        type=new_tokens,
        default=VERIFY_NEW_TOKENS,
        metavar="K",
        help=f"greedy tokens after each GPT prompt (default: {VERIFY_NEW_TOKENS})",
    )
    parser.add_argument(
        "--record-in",
        default=None,
        metavar="SOURCE",
        help=RECORD_IN_HELP,
    )
    parser.add_argument("--json", action="store_true", help="print the measurements as one JSON object")


def line(check) -> str:
    """A file's line: runtime, file, precision: agreement (or why it was not measured); speed."""
    row = check.row
    return f"{row.runtime} {row.file} ({row.precision}): {row.agreement}" + (f"; {row.speed}" if row.speed else "")


def lines(verification) -> list[str]:
    """A line per file (`line`), then the cards written."""
    return [line(check) for check in verification.checks] + [
        f"Runs in table written to {card}" for card in verification.cards
    ]


def report(verification, command: str, as_json: bool = False, aside: bool = False) -> int:
    """Print what `verification` found (`lines`, or JSON; `aside`: on stderr, each file's line after `minitf
    COMMAND: verified:` or `not verified:`, for a command whose output is something else) and, when an export
    claiming exactness is not exact, its first difference on stderr; the exit status: 1 then, and 1 where nothing
    was measured unless `aside` (the export itself was written), else 0."""
    for note in verification.notes:
        print(f"minitf {command}: note: {note}", file=sys.stderr)
    if aside:
        for check in verification.checks:
            said = "verified" if check.agrees is not None else "not verified"
            print(f"minitf {command}: {said}: {line(check)}", file=sys.stderr)
    else:
        print(json.dumps(verification.as_dict(), indent=2) if as_json else "\n".join(lines(verification)))
    if verification.failures or not (aside or verification.measured):
        print(f"minitf {command}: {verification.summary()}", file=sys.stderr)
        return 1
    return 0


def verify_after_export(out, source: str, revision: str | None, command: str) -> int:
    """What `minitf export` runs once it wrote OUT (unless --no-verify): OUT measured against SRC with a few prompts,
    told on stderr (stdout says what was exported); 1 when an export claiming exactness is not exact."""
    from hf_minitf.verification import verify_export

    verification = verify_export(
        out, source, prompts=EXPORT_VERIFY_PROMPTS, new_tokens=EXPORT_VERIFY_NEW_TOKENS, revision=revision
    )
    return report(verification, command, aside=True)


def verify_before_push(source, repo_id: str):
    """What `minitf push --native/--space` runs on the export before uploading it: the check `push_native` and
    `push_space` call, which writes the table into the card uploaded (the source's card is left as it is) and
    refuses an export that claims exactness and is not (nothing is uploaded)."""
    from hf_minitf.commands.common import CommandError
    from hf_minitf.verification import verify_export

    def check(export) -> None:
        verification = verify_export(
            export, source, prompts=EXPORT_VERIFY_PROMPTS, new_tokens=EXPORT_VERIFY_NEW_TOKENS, export_name=repo_id
        )
        if verification.failures:
            raise CommandError(verification.summary())
        report(verification, "push", aside=True)

    return check


@reports_errors("verify")
def run(args: argparse.Namespace) -> int:
    """`minitf verify EXPORT [--source FOLDER] [--prompts N] [--new-tokens K] [--record-in SOURCE] [--json]`."""
    from hf_minitf.commands.common import quiet_transformers
    from hf_minitf.verification import verify_export

    quiet_transformers()
    verification = verify_export(
        args.export, args.source, prompts=args.prompts, new_tokens=args.new_tokens, record_in=args.record_in
    )
    return report(verification, "verify", args.json)
