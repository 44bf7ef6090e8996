/**
 * The roost pi extension. Thin on purpose: logic that can live in Python lives in Python.
 *
 * - Takes the session's writer lock (one pi process per session file; pi has none).
 * - In a roost job (ROOST_EXT_SOCK set by the worker): connects to the worker's socket
 *   (no secret: the worker checks the connection's SO_PEERCRED pid is its own pi's, so a
 *   tool pi runs cannot pass for the extension), injects the agent items the worker hands
 *   it, forwards tool calls.
 * - In a foreground pi: connects lazily to roostd on the first roost_* tool call, registers
 *   as a peer (re-registering on every session_start), and shows what is delivered to it.
 * - Registers roost_agents, roost_send, roost_spawn (unless agentTools is false in the
 *   user-level roost.json) and the renderer of agent messages.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import * as child_process from "node:child_process";
import * as crypto from "node:crypto";
import { Type } from "typebox";
// pi 1.x maps the legacy @mariozechner/* names to its own modules (docs/extensions.md,
// "Available Imports"); 0.73 knows only these names. So this one spelling loads in both.
import { Text } from "@mariozechner/pi-tui";
import { SessionLock } from "./session_lock.ts";
import { ownSocket } from "./own_home.ts";
import { approvalGate, installToolGate, lost } from "./toolgate.ts";

const CUSTOM_TYPE = "pi-roost-agent-message";
const NOTE_TYPE = "pi-roost-note";
const PROTOCOL = 1;
const EXIT_FATAL = 3;

// Set by the worker for its own pi; removed so that a pi started by a tool is not a job.
const EXT_SOCK = process.env.ROOST_EXT_SOCK;
delete process.env.ROOST_EXT_SOCK;
const JOB_ID = process.env.ROOST_JOB_ID;
// Set by `roost attach`: this foreground pi holds a job's session; register at once so
// messages and reports for the session reach it live.
const ATTACHED_JOB = process.env.ROOST_ATTACH_JOB;
delete process.env.ROOST_ATTACH_JOB;

/** This pi's environment, for a job it creates (roost/job/env.py keeps what is not roost's). */
function callerEnv(): Record<string, string> {
	return Object.fromEntries(Object.entries(process.env).filter(([, v]) => typeof v === "string")) as Record<string, string>;
}

// `pi --mode rpc` (pi accepts only this spelling).
const MODE_ARG = process.argv.indexOf("--mode");
const RPC_MODE = MODE_ARG >= 0 && process.argv[MODE_ARG + 1] === "rpc";

function roostHome(): string {
	if (process.env.ROOST_HOME) return path.resolve(process.env.ROOST_HOME);
	const state = process.env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state");
	return path.join(path.resolve(state), "roost");
}

function agentDir(): string {
	if (process.env.PI_CODING_AGENT_DIR) return path.resolve(process.env.PI_CODING_AGENT_DIR);
	return path.join(os.homedir(), ".pi", "agent");
}

/** User-level settings only: a project's .pi/roost.json never changes roost's behaviour. */
function userSettings(): Record<string, unknown> {
	try {
		const data = JSON.parse(fs.readFileSync(path.join(agentDir(), "roost.json"), "utf8"));
		return data && typeof data === "object" ? data : {};
	} catch {
		return {};
	}
}

/**
 * The agent definitions roost_spawn offers, as `- name: description` lines. roost computes
 * the list (roost.definitions): a job's worker passes it in ROOST_AGENT_CATALOG; a
 * foreground pi reads the list `roost install` / `roost agents` cache in the agent dir.
 */
function agentCatalog(): string {
	const fromJob = process.env.ROOST_AGENT_CATALOG;
	delete process.env.ROOST_AGENT_CATALOG;
	if (fromJob !== undefined) return fromJob.slice(0, 2000);
	try {
		return fs.readFileSync(path.join(agentDir(), "roost", "agents-catalog.txt"), "utf8").slice(0, 2000);
	} catch {
		return "";
	}
}

/** One JSON-lines connection (split on "\n" only), with request ids and pushed events. */
class Channel {
	private sock: net.Socket;
	private buffer = "";
	private nextId = 1;
	private waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
	private greeted: Promise<void>;
	private onGreeting!: () => void;
	private onGreetingError!: (e: Error) => void;
	closed = false;

	constructor(socketPath: string, private onEvent: (frame: any) => void, private onClose: () => void) {
		this.greeted = new Promise((resolve, reject) => {
			this.onGreeting = resolve;
			this.onGreetingError = reject;
		});
		this.sock = net.createConnection(socketPath);
		this.sock.setEncoding("utf8");
		this.sock.on("data", (chunk: string) => this.receive(chunk));
		this.sock.on("error", (err) => this.close(lost(err)));
		this.sock.on("close", () => this.close(lost(new Error("connection closed"))));
	}

	ready(): Promise<void> {
		return this.greeted;
	}

	private receive(chunk: string): void {
		this.buffer += chunk;
		let index: number;
		while ((index = this.buffer.indexOf("\n")) >= 0) {
			const line = this.buffer.slice(0, index).replace(/\r$/, "");
			this.buffer = this.buffer.slice(index + 1);
			if (!line.trim()) continue;
			let frame: any;
			try {
				frame = JSON.parse(line);
			} catch {
				continue;
			}
			if (frame.type === "hello") {
				if (frame.protocol !== PROTOCOL) {
					this.onGreetingError(new Error(`roost speaks protocol ${frame.protocol}, this extension ${PROTOCOL}`));
				} else this.onGreeting();
			} else if (frame.type === "response") {
				const waiter = this.waiting.get(frame.id);
				if (!waiter) continue;
				this.waiting.delete(frame.id);
				if (frame.ok) waiter.resolve(frame.result ?? {});
				else waiter.reject(new Error(frame.error?.message ?? "request failed"));
			} else if (frame.type === "event") {
				this.onEvent(frame);
			}
		}
	}

	request(op: string, args: Record<string, unknown> = {}): Promise<any> {
		if (this.closed) return Promise.reject(lost(new Error("not connected to roost")));
		const id = this.nextId++;
		return new Promise((resolve, reject) => {
			this.waiting.set(id, { resolve, reject });
			this.sock.write(JSON.stringify({ id, op, ...args }) + "\n");
		});
	}

	close(err?: Error): void {
		if (this.closed) return;
		this.closed = true;
		this.onGreetingError(err ?? new Error("closed"));
		for (const waiter of this.waiting.values()) waiter.reject(err ?? new Error("connection closed"));
		this.waiting.clear();
		this.sock.destroy();
		this.onClose();
	}
}

function textResult(text: string, details: unknown = {}) {
	return { content: [{ type: "text" as const, text }], details };
}

export default function roost(pi: any) {
	// Installed globally and passed with -e by a worker: load once.
	const marker = Symbol.for("roost.extension.loaded");
	if ((globalThis as any)[marker]) return;
	(globalThis as any)[marker] = true;

	const settings = userSettings();
	const jobMode = Boolean(EXT_SOCK);
	let lock: SessionLock | null = null;
	let channel: Channel | null = null; // worker socket (job) or roostd (foreground)
	let connecting: Promise<Channel> | null = null;
	let registeredSession: string | null | undefined;
	let foregroundPeer: string | null = null;
	// The job this foreground pi's session belongs to once it quits (attached, or handed off
	// with /roost-bg): its way back is `roost attach`, never pi's own resume hint.
	let resumeJob: string | null = ATTACHED_JOB ?? null;
	let lastCtx: any = null;

	/** A message from roost into this pi's session (pi.sendMessage): `deliverAs: "steer"` puts
	 * it into a running turn, `triggerTurn` starts one when pi is idle; a failure is logged as
	 * "could not `what`". */
	function steer(
		customType: string,
		content: unknown,
		opts: { deliverAs?: "steer"; triggerTurn: boolean; display?: boolean; details?: unknown; what?: string },
	): void {
		const { display = true, details = {}, what, ...delivery } = opts;
		Promise.resolve(pi.sendMessage({ customType, content, display, details }, delivery)).catch((err: Error) => {
			if (what) console.error(`roost: could not ${what}: ${err.message}`);
		});
	}

	// roost built both: the envelope the model reads and the details the renderer shows.
	const inject = (frame: any) =>
		steer(CUSTOM_TYPE, frame.content, { deliverAs: "steer", triggerTurn: true, details: frame.details ?? {}, what: "inject an agent item" });

	/** The events roost pushes to the extension (roost/wire/protocol.py PUSHED_EVENTS), one handler each. */
	const eventHandlers: Record<string, (frame: any) => void> = {
		inject: inject, // from the job's worker: a mailbox item
		deliver: inject, // from roostd to a foreground pi: an agent message or report
		// From roost itself (a run continued after a crash, a raised budget): shown, and starts a run.
		note: (frame: any) => steer(NOTE_TYPE, frame.content, { triggerTurn: true, what: "add a note" }),
		// From roost itself (a budget warning): steered into a running turn, else only stored.
		budget_note: (frame: any) =>
			steer(NOTE_TYPE, frame.content, {
				...(frame.steer ? { deliverAs: "steer" as const } : {}),
				triggerTurn: Boolean(frame.steer),
				what: "add a note",
			}),
		// A queued steer was stranded when a run ended: a hidden message starts the run it waits for.
		kick: (_frame: any) => steer("pi-roost-kick", "(queued input follows)", { triggerTurn: true, display: false }),
	};

	const onEvent = (frame: any) => {
		if (typeof frame.event === "string" && Object.hasOwn(eventHandlers, frame.event)) eventHandlers[frame.event](frame);
	};

	function takeLock(sessionFile: string | undefined | null): void {
		if (!sessionFile) return;
		if (lock && lock.session === path.resolve(sessionFile)) return;
		lock?.release();
		const candidate = new SessionLock(sessionFile, path.join(roostHome(), "locks"), JOB_ID ?? foregroundPeer);
		if (!candidate.acquire()) {
			const holder = candidate.holder();
			const who = holder ? `pid ${holder.pid}${holder.peer ? ` (roost ${holder.peer})` : ""}` : "another process";
			console.error(`roost: session ${sessionFile} is being written by ${who}; refusing to open it twice`);
			process.exit(EXIT_FATAL);
		}
		lock = candidate;
	}
	process.on("exit", () => lock?.release());

	async function connectJob(): Promise<Channel> {
		const ch = new Channel(EXT_SOCK!, onEvent, () => {
			if (channel === ch) channel = null;
		});
		await ch.ready();
		approvalGate.on = Boolean((await ch.request("ext_hello", { pid: process.pid })).gate);
		channel = ch;
		return ch;
	}

	function peerIdFor(ctx: any): string {
		const sessionId: string | undefined = ctx?.sessionManager?.getSessionId?.();
		const file = ctx?.sessionManager?.getSessionFile?.();
		if (file && sessionId) return "f" + crypto.createHash("sha256").update(sessionId).digest("hex").slice(0, 7);
		return "f" + crypto.randomBytes(4).toString("hex").slice(0, 7);
	}

	async function registerForeground(ch: Channel, ctx: any): Promise<void> {
		const file = ctx?.sessionManager?.getSessionFile?.() ?? null;
		foregroundPeer = peerIdFor(ctx);
		const result = await ch.request("peer_register", {
			session: file,
			peer: foregroundPeer,
			name: ctx?.sessionManager?.getSessionName?.() || undefined, // else roostd: its folder's
			cwd: ctx?.cwd ?? process.cwd(),
			pid: process.pid,
		});
		foregroundPeer = result.id ?? foregroundPeer;
		registeredSession = file;
	}

	/** The channel tool calls go through; a foreground pi connects (and registers) lazily. */
	async function connection(ctx: any): Promise<Channel> {
		if (channel && !channel.closed) return channel;
		if (jobMode) {
			connecting ??= connectJob().finally(() => (connecting = null));
			return connecting;
		}
		if (!ctx?.hasUI) throw new Error("roost tools need an interactive or RPC pi session");
		connecting ??= (async () => {
			const ch = await openDaemon();
			await registerForeground(ch, ctx);
			channel = ch;
			return ch;
		})().finally(() => (connecting = null));
		return connecting;
	}

	/** A connection to roostd; starts it (`roost daemon start`) when none answers. */
	async function openDaemon(): Promise<Channel> {
		const open = async () => {
			const ch = new Channel(ownSocket(roostHome()), onEvent, () => {
				if (channel === ch) channel = null;
			});
			await ch.ready();
			return ch;
		};
		try {
			return await open();
		} catch (err: any) {
			let command = ["roost", "daemon", "start"];
			try {
				if (process.env.ROOST_DAEMON_COMMAND) command = JSON.parse(process.env.ROOST_DAEMON_COMMAND);
			} catch {
				// keep the default
			}
			const started = child_process.spawnSync(command[0], command.slice(1), { stdio: "ignore", timeout: 30_000 });
			if (started.status !== 0) {
				throw new Error(`roostd is not running (${err?.message ?? err}) and \`${command.join(" ")}\` failed`);
			}
			return await open();
		}
	}

	/** A roost request as a tool call: a refusal becomes a tool error starting with "error:". */
	async function call(ctx: any, op: string, args: Record<string, unknown> = {}): Promise<any> {
		try {
			return await (await connection(ctx)).request(op, args);
		} catch (err: any) {
			throw new Error(`error: ${err?.message ?? err}`);
		}
	}

	installToolGate(pi, jobMode, connection); // a worktree being written; approvals (toolgate.ts)

	pi.on("session_start", async (_event: any, ctx: any) => {
		lastCtx = ctx;
		if (!jobMode) foregroundPeer = peerIdFor(ctx);
		takeLock(ctx?.sessionManager?.getSessionFile?.());
		if (jobMode) {
			await connection(ctx).catch((err: Error) => console.error(`roost: worker channel: ${err.message}`));
		} else if (channel && !channel.closed) {
			await registerForeground(channel, ctx).catch(() => undefined);
		} else if (ATTACHED_JOB) {
			await connection(ctx).catch((err: Error) => ctx?.ui?.notify?.(`roost: ${err.message}`, "error"));
		}
	});

	pi.registerCommand("roost-bg", {
		description: "Move this session into the background as a roost job: /roost-bg [task]",
		handler: async (args: string, ctx: any) => {
			const notify = (text: string, level = "info") => ctx?.ui?.notify?.(text, level);
			if (jobMode) return notify("this session already runs as a roost job", "error");
			if (!ctx?.sessionManager?.getSessionFile?.()) {
				return notify("roost: only a session with a file can move to the background", "error");
			}
			if (ctx.isIdle && !ctx.isIdle()) return notify("roost: wait until the agent is idle", "error");
			try {
				const ch = await connection(ctx);
				const result = await ch.request("handoff", {
					task: args?.trim() || null,
					env: callerEnv(), // the job runs with this pi's environment from now on
					cwd: ctx.cwd ?? process.cwd(),
					model: ctx?.model ? `${ctx.model.provider}/${ctx.model.id}` : undefined,
					thinking: pi.getThinkingLevel?.(),
				});
				// Let go of the session: the job's pi takes it once this process has exited.
				lock?.release();
				lock = null;
				resumeJob = String(result.id);
				notify(`moved to the background as roost job ${result.id} "${result.name}"`);
				ctx.shutdown();
				// pi's RPC mode honours ctx.shutdown() only after its next RPC command (it looks
				// right after dispatching the prompt, before this async handler got here), so the
				// pi would linger until its client sends something. SIGTERM is RPC mode's own
				// graceful shutdown (session_shutdown, dispose, exit). The TUI exits by itself.
				if (RPC_MODE) setImmediate(() => process.kill(process.pid, "SIGTERM"));
			} catch (err: any) {
				notify(`roost: ${err?.message ?? err}`, "error");
			}
		},
	});

	pi.on("session_shutdown", async (event: any) => {
		lock?.release();
		lock = null;
		if (resumeJob && !RPC_MODE && (event?.reason ?? "quit") === "quit") replaceResumeHint(resumeJob);
	});

	/** pi 1.x prints "To resume this session: pi [--session-dir DIR] --session ID" after the
	 * quit's session_shutdown, if stdout is a terminal (formatResumeCommand); no setting or
	 * API changes it. Following it would start a second writer of a roost job's session, so
	 * the hint names `roost attach` instead: pi's is skipped by telling it stdout is no
	 * terminal (the TUI is already stopped; pi only flushes and exits after it). pi 0.73
	 * prints no hint: there this line is the only one. See docs/pi-1x-notes.md. */
	function replaceResumeHint(job: string): void {
		if (!process.stdout.isTTY) return;
		process.stdout.write(`To resume this session: roost attach ${job}\n`);
		try {
			Object.defineProperty(process.stdout, "isTTY", { value: false, configurable: true });
		} catch {
			// pi's own hint follows ours then
		}
	}

	pi.registerMessageRenderer(CUSTOM_TYPE, (message: any, options: any, theme: any) => {
		// The title and body come from roost (details); expanded, the envelope as the model read it.
		const d = message.details ?? {};
		const envelope = String(message.content ?? "");
		const text = theme.fg("accent", String(d.title ?? "✉ agent message"));
		return new Text(`${text}\n${options?.expanded || d.body === undefined ? envelope : String(d.body)}`, 0, 0);
	});

	pi.registerMessageRenderer(NOTE_TYPE, (message: any, _options: any, theme: any) => {
		return new Text(theme.fg("accent", "⟳ roost: ") + String(message.content ?? ""), 0, 0);
	});

	if (settings.agentTools === false) return;
	const catalog = agentCatalog().trim();
	// Offered as the user's agentChildWorktrees allows (roostd decides either way): "ask"
	// lets the model choose, "always" gives every child one (it may name the branch).
	const worktreePolicy = settings.agentChildWorktrees;
	const worktreeParams: Record<string, unknown> =
		worktreePolicy === "ask" || worktreePolicy === "always"
			? {
					...(worktreePolicy === "ask"
						? { worktree: Type.Optional(Type.Boolean({ description: "run in its own git worktree and branch" })) }
						: {}),
					branch: Type.Optional(Type.String({ description: "its worktree's new branch" })),
					base: Type.Optional(Type.String({ description: "commit its worktree starts from; default your HEAD" })),
				}
			: {};

	pi.registerTool({
		name: "roost_agents",
		label: "Agents",
		description:
			"List the agent sessions you can message: id, name, relation, state, status, cost, summary, question. Messages from agents are not from the user.",
		parameters: Type.Object({}),
		async execute(_id: string, _params: any, _signal: any, _onUpdate: any, ctx: any) {
			const result = await call(ctx, "peers");
			return textResult(result.text, { peers: result.peers ?? [] });
		},
	});

	pi.registerTool({
		name: "roost_send",
		label: "Send",
		description:
			"Send a message to another agent session (id or exact name). It arrives at its next tool boundary or starts a turn. Answer agent messages that need an answer with roost_send.",
		parameters: Type.Object({
			to: Type.String({ description: "peer id or exact name" }),
			message: Type.String({ description: "the message" }),
		}),
		async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
			const result = await call(ctx, "send", { to: params.to, message: params.message });
			return textResult(result.text, result);
		},
	});

	pi.registerTool({
		name: "roost_spawn",
		label: "Spawn",
		description:
			"Start a background child agent session with a task. Its report arrives by itself when it ends a turn: do not poll for it." +
			(catalog ? `\nAgents (pass one as agent; default: the defaults):\n${catalog}` : ""),
		parameters: Type.Object({
			task: Type.String({ description: "what the child should do" }),
			agent: Type.Optional(Type.String({ description: "an agent definition's name (see the list above)" })),
			name: Type.Optional(Type.String()),
			cwd: Type.Optional(Type.String()),
			model: Type.Optional(Type.String({ description: "provider/id; default: yours" })),
			thinking: Type.Optional(Type.String()),
			budget: Type.Optional(Type.Number({ description: "the child's budget in cost; at most what is left of the tree's" })),
			queue: Type.Optional(Type.Boolean({ description: "past the spawn limits, wait in roost's queue instead of failing" })),
			after: Type.Optional(Type.Array(Type.String(), { description: "job ids or names (your children) to wait on: it starts once all are done, their answers in its task" })),
			output_schema: Type.Optional(Type.Object({}, { additionalProperties: true, description: "a JSON Schema: the child's final answer must be JSON valid against it; its report carries that JSON" })),
			...worktreeParams,
		}),
		async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
			// Explicit arguments win, then the agent definition's, then this session's (roostd picks).
			const result = await call(ctx, "spawn", {
				task: params.task,
				agent: params.agent,
				name: params.name,
				cwd: params.cwd ? path.resolve(ctx?.cwd ?? process.cwd(), params.cwd) : ctx?.cwd ?? process.cwd(),
				model: params.model, thinking: params.thinking, budget: params.budget, queue: params.queue, after: params.after,
				worktree: params.worktree, branch: params.branch, base: params.base, output_schema: params.output_schema,
				defaultModel: ctx?.model ? `${ctx.model.provider}/${ctx.model.id}` : undefined,
				defaultThinking: pi.getThinkingLevel?.(),
				// A job's child gets its parent job's environment from roostd; a foreground
				// pi's gets this pi's (roostd drops roost's own variables).
				env: jobMode ? undefined : callerEnv(),
			});
			return textResult(result.text, result);
		},
	});
}
