/**
 * The roost extension's gate on a job's tool calls (pi's `tool_call` event, which waits for
 * its handlers and skips a blocked call, the reason becoming its result):
 *
 * - No tool runs in a half-written worktree: a new worktree's files are written while pi
 *   boots (roost/worktrees/checkout.py); the call waits until the worker removed the marker
 *   (if the worker dies, this pi dies with it).
 * - Approvals (docs/guides/approvals.md): a job with a policy (ext_hello said `gate`) asks
 *   its worker (`gate`, roost/worker/gate.py decides) before every call; the call waits for
 *   the answer. Fails closed: a call roost could not ask about does not run. A worker that
 *   went away while a call waited (killed: its pi gets SIGTERM, its parent-death signal)
 *   decides nothing: the call waits on, asked again if a worker answers, until pi's
 *   shutdown aborts the run. A `block` there would be the call's result, and pi would ask
 *   the model again before it shut down: a run ended by that answer is no run cut short,
 *   and the restarted worker would not continue it (docs/known-limits.md).
 */
import * as fs from "node:fs";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import type { GateAnswer, GateAsk } from "./wire.ts";

/** A new worktree whose files the worker is still writing. */
let CHECKOUT_PENDING = process.env.ROOST_CHECKOUT_PENDING;
delete process.env.ROOST_CHECKOUT_PENDING;

/** Set from the worker's ext_hello answer: this job's calls go through its approvals. */
export const approvalGate = { on: false };

/** How long a call whose worker went away waits before it asks again. */
const ASK_AGAIN_MS = 500;

/** An error `lost` marked. */
type LostError = Error & { lost?: boolean };

/** Marks `err` as the loss of roost's end of the connection (closed, refused, missing),
 * not an answer from it. */
export function lost(err: Error): Error {
	(err as LostError).lost = true;
	return err;
}

/** What a caught value says: an Error's message, else the value itself. */
export function errorText(err: unknown): string {
	return String((err as { message?: unknown } | null | undefined)?.message ?? err);
}

/** roost's end as the gate uses it (roost.ts's Channel). */
export interface GateChannel {
	request(op: "gate", args: GateAsk): Promise<GateAnswer>;
}

/** True once `signal` is aborted; false after `ms` without. */
function abortedWithin(signal: AbortSignal | undefined, ms: number): Promise<boolean> {
	if (signal?.aborted) return Promise.resolve(true);
	return new Promise((resolve) => {
		const done = (aborted: boolean) => {
			clearTimeout(timer);
			signal?.removeEventListener("abort", onAbort);
			resolve(aborted);
		};
		const onAbort = () => done(true);
		const timer = setTimeout(() => done(false), ms);
		signal?.addEventListener("abort", onAbort, { once: true });
	});
}

export function installToolGate(
	pi: ExtensionAPI,
	jobMode: boolean,
	connection: (ctx: ExtensionContext) => Promise<GateChannel>,
): void {
	if (CHECKOUT_PENDING) {
		pi.on("tool_call", async () => {
			while (CHECKOUT_PENDING && fs.existsSync(CHECKOUT_PENDING)) {
				await new Promise((resolve) => setTimeout(resolve, 20));
			}
			CHECKOUT_PENDING = undefined;
			return undefined;
		});
	}
	if (!jobMode) return;
	pi.on("tool_call", async (event, ctx) => {
		if (!approvalGate.on) return undefined;
		const signal: AbortSignal | undefined = ctx?.signal; // now: a disposed ctx throws
		const ask: GateAsk = { call: event.toolCallId, tool: event.toolName, input: event.input ?? {} };
		for (;;) {
			try {
				const ch = await connection(ctx);
				const answer = await ch.request("gate", ask);
				return answer.block ? { block: true, reason: String(answer.reason ?? "denied") } : undefined;
			} catch (err) {
				if (!(err as LostError | null | undefined)?.lost) {
					return { block: true, reason: `roost could not ask for this call's approval: ${errorText(err)}` };
				}
			}
			// The worker went away: the same call is asked again (one entry per call id)
			// until a worker answers or the run is aborted (pi then records the call as
			// aborted, whatever this returns).
			if (await abortedWithin(signal, ASK_AGAIN_MS)) {
				return { block: true, reason: "aborted: roost's worker went away before it answered" };
			}
		}
	});
}
