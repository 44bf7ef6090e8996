"""Durable, shell-inspectable mailboxes: one per job, Maildir-style.

Layout of a mailbox directory (all directories mode 0700, files 0600)::

    seq                  the seq counter; writers flock it while they post
    tmp/                 writers stage a file here, fsync it, then rename it into new/
    new/000000000017.json   pending items (12-digit zero-padded seq), never modified
    cur/000000000016.json   acknowledged items (moved here by rename on ack)
    bad/<name>, bad/<name>.why   files found in new/ that are not items, or are replays,
                                 with the reason

An item file is one JSON object on one newline-terminated line with the keys `seq`, `id`
(16 random hex digits), `kind` (reply | message | report), `from` ({id, name, relation},
or null for the user), `text`, `created` (ISO-8601 UTC with milliseconds) and any extras
(for reports: `result`, `state`, `question`, `error`).

A replay -- an item in new/ whose name is already in cur/, or whose `id` an item in cur/
or another item in new/ already has -- is quarantined to bad/, whatever its seq, so a
copy of a delivered item never reaches the receiver again (docs/reference/mailbox.md).
Every file kept is 0600, whatever mode it arrived with.

Writing::

    box = Mailbox(path, max_replies=50, max_agent=20)
    item = box.post(kind="message", text="hi", sender={"id": "a1b2c3d4", "name": "x",
                    "relation": "child"})          # sender=None for the user
    box.ack(item.seq)                              # cumulative: every pending seq <= it

`post()` returns once the item is durable; it raises MailboxFull (nothing written) when
the cap for its kind is reached (`reply` against max_replies, `message`+`report` against
max_agent), InvalidItem (a ValueError) for a malformed item, MailboxError for I/O
failures. Seqs strictly increase across all kinds and processes and are never reused;
a crash may leave a gap.

Reading, blocking (a worker thread)::

    with box.watch() as watcher:                   # pending items first, then new ones
        for item in watcher:                       # blocks; ends when closed
            deliver(item); box.ack(item.seq)

    watcher.next_item(timeout=1.0)                 # Item, or None on timeout/close

Reading from asyncio: the watcher calls every `on_change` callback from its own thread
whenever new/ changes; hop to the loop and drain without blocking::

    wake = asyncio.Event()
    watcher = box.watch(on_change=lambda: loop.call_soon_threadsafe(wake.set))
    try:
        while True:
            for item in watcher.drain():           # first call returns what is pending
                await deliver(item)
            await wake.wait()
            wake.clear()
    finally:
        watcher.close()

Delivery is at-least-once: a watcher yields each seq once, but a new watcher (after a
restart) yields again whatever was not acknowledged; receivers drop resends by seq.
"""

from roost.mailbox.box import DEFAULT_MAX_AGENT, DEFAULT_MAX_REPLIES, Mailbox
from roost.mailbox.errors import InvalidItem, MailboxError, MailboxFull
from roost.mailbox.item import AGENT_KINDS, KINDS, Item
from roost.mailbox.watch import MailboxWatcher

__all__ = [
    "AGENT_KINDS",
    "DEFAULT_MAX_AGENT",
    "DEFAULT_MAX_REPLIES",
    "KINDS",
    "InvalidItem",
    "Item",
    "Mailbox",
    "MailboxError",
    "MailboxFull",
    "MailboxWatcher",
]
