/**
 * `roost run --sandbox` inside pi: thin on purpose. roost (roost/sandbox.py) computed the
 * plan and the worker passed it in ROOST_SANDBOX: bwrap's argument list, the writable
 * roots, the hidden paths and the pattern of the variables a command never sees.
 *
 * - pi's `bash` tool is registered again with a spawn hook: every command runs as
 *   `exec bwrap ... -- bash -c COMMAND`, without the secret variables.
 * - `write`/`edit` outside the roots, and `read`/`grep`/`find`/`ls` of a hidden path, are
 *   refused (pi runs these itself, outside the sandbox).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
// pi 1.x maps the legacy name to its own module (as roost.ts's pi-tui import).
import { createBashToolDefinition } from "@mariozechner/pi-coding-agent";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const RAW = process.env.ROOST_SANDBOX;
delete process.env.ROOST_SANDBOX;

type Plan = { argv: string[]; roots: string[]; hidden: string[]; drop: string; network: string };

function quote(text: string): string {
	return `'${text.replace(/'/g, `'\\''`)}'`;
}

function inside(target: string, root: string): boolean {
	return target === root || target.startsWith(root.endsWith("/") ? root : `${root}/`);
}

/** The path a tool would touch: absolute, its existing part's symlinks resolved. */
function resolved(given: string, cwd: string): string {
	let text = given.startsWith("@") ? given.slice(1) : given;
	if (text === "~" || text.startsWith("~/")) text = os.homedir() + text.slice(1);
	let head = path.resolve(cwd, text);
	const tail: string[] = [];
	for (;;) {
		try {
			head = fs.realpathSync(head);
			break;
		} catch {
			const parent = path.dirname(head);
			if (parent === head) break;
			tail.unshift(path.basename(head));
			head = parent;
		}
	}
	return path.join(head, ...tail);
}

/** The longest of the roots and hidden paths that holds `target`: hidden wins its own. */
function hiddenFrom(target: string, plan: Plan): boolean {
	let best = "";
	let hidden = false;
	for (const root of plan.roots) if (inside(target, root) && root.length > best.length) [best, hidden] = [root, false];
	for (const dir of plan.hidden) if (inside(target, dir) && dir.length >= best.length) [best, hidden] = [dir, true];
	return hidden;
}

/**
 * The worker loads this file (`-e`, before roost.ts) only for a sandboxed job: without a plan,
 * or with one it cannot install, it throws, and pi exits on an extension that fails to load
 * (1.x and 0.73 alike): the job fails, never running unsandboxed.
 */
export default function sandbox(pi: ExtensionAPI): void {
	if (!installSandbox(pi)) throw new Error("roost: a sandboxed job without its plan (ROOST_SANDBOX)");
}

/** Install the sandbox when there is a plan; true if it did. A bad plan throws. */
export function installSandbox(pi: ExtensionAPI): boolean {
	if (!RAW) return false;
	const plan: Plan = JSON.parse(RAW);
	if (!Array.isArray(plan.argv) || plan.argv.length === 0) throw new Error("roost: a sandbox plan without bwrap");
	const drop = new RegExp(`^(?:${plan.drop})$`, "i");
	const prefix = `exec ${plan.argv.map(quote).join(" ")} `;
	const cwd = process.cwd();
	pi.registerTool(
		createBashToolDefinition(cwd, {
			spawnHook: ({ command, cwd: where, env }) => {
				const clean: Record<string, string> = {};
				for (const [key, value] of Object.entries(env ?? {})) {
					if (!drop.test(key) && typeof value === "string") clean[key] = value;
				}
				return { command: prefix + quote(command), cwd: where, env: clean };
			},
		}),
	);
	pi.on("tool_call", async (event) => {
		// Each tool's own arguments; only their path fields are read here.
		const input: Record<string, unknown> = event.input ?? {};
		const tool = event.toolName;
		if (tool === "write" || tool === "edit") {
			const target = resolved(String(input.path ?? input.file_path ?? ""), cwd);
			if (!plan.roots.some((root) => inside(target, root)) || hiddenFrom(target, plan)) {
				return {
					block: true,
					reason: `sandbox: ${tool} ${target} refused: outside the job's writable folders (${plan.roots.join(", ")})`,
				};
			}
		} else if (tool === "read" || tool === "grep" || tool === "find" || tool === "ls") {
			const target = resolved(String(input.path ?? "."), cwd);
			if (hiddenFrom(target, plan)) {
				return { block: true, reason: `sandbox: ${tool} ${target} refused: hidden from this job` };
			}
		}
		return undefined;
	});
	return true;
}
