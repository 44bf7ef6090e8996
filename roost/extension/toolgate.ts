/**
 * The roost extension's gate on a job's tool calls (pi's `tool_call` event, which waits for
 * its handlers and skips a blocked call, the reason becoming its result):
 *
 * - No tool runs in a half-written worktree: a new worktree's files are written while pi
 *   boots (roost/worktrees/checkout.py); the call waits until the worker removed the marker
 *   (if the worker dies, this pi dies with it).
 * - Approvals (docs/guides/approvals.md): a job with a policy (ext_hello said `gate`) asks
 *   its worker (`gate`, roost/worker/gate.py decides) before every call; the call waits for
 *   the answer. Fails closed: a call roost could not ask about does not run.
 */
import * as fs from "node:fs";

/** A new worktree whose files the worker is still writing. */
let CHECKOUT_PENDING = process.env.ROOST_CHECKOUT_PENDING;
delete process.env.ROOST_CHECKOUT_PENDING;

/** Set from the worker's ext_hello answer: this job's calls go through its approvals. */
export const approvalGate = { on: false };

export function installToolGate(pi: any, jobMode: boolean, connection: (ctx: any) => Promise<any>): void {
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
	pi.on("tool_call", async (event: any, ctx: any) => {
		if (!approvalGate.on) return undefined;
		try {
			const ch = await connection(ctx);
			const answer = await ch.request("gate", { call: event.toolCallId, tool: event.toolName, input: event.input ?? {} });
			return answer.block ? { block: true, reason: String(answer.reason ?? "denied") } : undefined;
		} catch (err: any) {
			return { block: true, reason: `roost could not ask for this call's approval: ${err?.message ?? err}` };
		}
	});
}
