/**
 * The shapes of what roost and the extension say to each other (roost/wire/protocol.py), as far as
 * the extension reads them: types only, for `tsc` (scripts/tsc). Imported with `import type`,
 * which pi's loader erases: this file is never loaded, and `roost install` leaves it out.
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

/** What a custom message of roost's holds (pi.sendMessage's `content`). */
export type MessageContent = Parameters<ExtensionAPI["sendMessage"]>[0]["content"];

/** A line roost sends: its greeting, a request's response, a pushed event; trusted as roost
 * writes them (JSON.parse checks nothing). */
export type Frame =
	| { type: "hello"; protocol: unknown }
	| { type: "response"; id: number; ok: boolean; result?: unknown; error?: { message?: string } | null }
	| EventFrame;

/** A pushed event (roost/wire/protocol.py PUSHED_EVENTS); `content` in those that carry one. */
export interface EventFrame {
	type: "event";
	event: unknown;
	content: MessageContent;
	details?: unknown;
	steer?: boolean;
}

/** The details of an agent item roost injects: the title and body its renderer shows. */
export type AgentItemDetails = { title?: unknown; body?: unknown };

/** A tool call's answer from roost: the text the model reads, the rest its details. */
export type ToolReply = { text: string } & Record<string, unknown>;

/** The question `gate` asks about one tool call, and the answer (roost/worker/gate.py). */
export type GateAsk = { call: string; tool: string; input: unknown };
export type GateAnswer = { block?: boolean; reason?: unknown };

/** What roost answers each op the extension requests. */
export interface Replies {
	ext_hello: { gate?: boolean };
	peer_register: { id?: string };
	handoff: { id: unknown; name?: unknown };
	peers: ToolReply & { peers?: unknown[] };
	send: ToolReply;
	spawn: ToolReply;
	gate: GateAnswer;
}
