/**
 * One writer per session file: the TypeScript half of roost's session lock.
 *
 * The twin of roost/locks/session_lock.py; both implement the protocol in docs/locks.md
 * and must stay in step. Node built-ins only, synchronous fs calls, Linux /proc for
 * process identity (elsewhere a holder is judged by `kill(pid, 0)` alone).
 *
 * The lock belongs to the process: acquire() on a lock this process already holds returns
 * true, and release() removes the file whenever it names this process. While held, the lock
 * is released on process "exit"; a process that dies without running exit handlers (kill -9,
 * an unhandled signal) leaves a stale lock that the next acquirer takes over.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

export interface LockHolder {
	pid: number;
	startTime: number;
	startTicks: number | null;
	bootId: string | null;
	peer: string | null;
	session: string;
	acquired: string | null;
}

/** Seconds; see the Python side. */
export const START_TOLERANCE = 0.05;
/** A corrupt lock file younger than this (seconds) may be a hand edit: treat it as held. */
export const CORRUPT_GRACE = 5;
const TMP_MAX_AGE = 3600;
const MAX_ROUNDS = 16;
const MAX_CLAIMS = 64;
/** USER_HZ: the unit of /proc/<pid>/stat field 22 (fixed at 100 for userspace on Linux). */
const CLK_TCK = 100;
const HAVE_PROC = fs.existsSync("/proc/self/stat");

interface Proc {
	startTime: number | null;
	startTicks: number | null;
	bootId: string | null;
	zombie: boolean;
}

function errCode(e: unknown): string | undefined {
	return (e as NodeJS.ErrnoException | null)?.code;
}

function bootTime(): number {
	for (const line of fs.readFileSync("/proc/stat", "latin1").split("\n")) {
		if (line.startsWith("btime")) return Number(line.trim().split(/\s+/)[1]);
	}
	throw new Error("no btime line in /proc/stat");
}

function bootId(): string | null {
	try {
		return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || null;
	} catch {
		return null;
	}
}

/** What /proc says about `pid`, or null when there is no such process. */
function proc(pid: number): Proc | null {
	if (!Number.isInteger(pid) || pid <= 0) return null;
	if (!HAVE_PROC) {
		try {
			process.kill(pid, 0);
		} catch (e) {
			if (errCode(e) !== "EPERM") return null;
		}
		return { startTime: null, startTicks: null, bootId: null, zombie: false };
	}
	let data: string;
	try {
		data = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
	} catch (e) {
		const code = errCode(e);
		if (code === "EACCES" || code === "EPERM") {
			// hidepid: the process exists but we may not look; assume it is the holder.
			return { startTime: null, startTicks: null, bootId: null, zombie: false };
		}
		return null;
	}
	// comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
	const fields = data.slice(data.lastIndexOf(")") + 2).trim().split(/\s+/);
	const state = fields[0];
	const ticks = Number(fields[19]); // fields 3 and 22
	return {
		startTime: ticks / CLK_TCK + bootTime(),
		startTicks: ticks,
		bootId: bootId(),
		zombie: state === "Z" || state === "X",
	};
}

/** The start time of `pid` exactly as Python's psutil create_time() computes it, or null. */
export function processStartTime(pid: number): number | null {
	return proc(pid)?.startTime ?? null;
}

/** True when the holder's process still runs (the same process, not a reused pid). */
export function isAlive(holder: LockHolder): boolean {
	const p = proc(holder.pid);
	if (p === null || p.zombie) return false;
	if (p.startTime === null) return true;
	if (holder.startTicks !== null && holder.bootId !== null && p.startTicks !== null && p.bootId !== null) {
		// Ticks since boot do not move when the wall clock is stepped; btime does.
		return holder.bootId === p.bootId && holder.startTicks === p.startTicks;
	}
	return Math.abs(holder.startTime - p.startTime) < START_TOLERANCE;
}

/** `<locksDir>/<sha256 hex of path.resolve(sessionPath)>.json` (symlinks are not resolved). */
export function lockPathFor(sessionPath: string, locksDir: string): string {
	const digest = crypto.createHash("sha256").update(path.resolve(sessionPath), "utf8").digest("hex");
	return path.join(path.resolve(locksDir), `${digest}.json`);
}

function parse(raw: Buffer): LockHolder | null {
	let obj: unknown;
	try {
		obj = JSON.parse(raw.toString("utf8"));
	} catch {
		return null;
	}
	if (typeof obj !== "object" || obj === null || Array.isArray(obj)) return null;
	const o = obj as Record<string, unknown>;
	if (!Number.isInteger(o.pid) || typeof o.startTime !== "number") return null;
	const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
	return {
		pid: o.pid as number,
		startTime: o.startTime,
		startTicks: Number.isInteger(o.startTicks) ? (o.startTicks as number) : null,
		bootId: str(o.bootId),
		peer: str(o.peer),
		session: str(o.session) ?? "",
		acquired: str(o.acquired),
	};
}

/** One incarnation of a lock (or claim) file as read at one moment. */
interface Snapshot {
	ident: string;
	holder: LockHolder | null;
	age: number;
}

function read(file: string): Snapshot | null {
	let fd: number;
	try {
		fd = fs.openSync(file, "r");
	} catch (e) {
		if (errCode(e) === "ENOENT") return null;
		throw e;
	}
	try {
		const st = fs.fstatSync(fd, { bigint: true });
		const raw = fs.readFileSync(fd);
		const ident = crypto
			.createHash("sha256")
			.update(`${st.ino}:${st.mtimeNs}:`)
			.update(raw)
			.digest("hex")
			.slice(0, 32);
		return { ident, holder: parse(raw), age: Date.now() / 1000 - Number(st.mtimeMs) / 1000 };
	} finally {
		fs.closeSync(fd);
	}
}

/** The process named by the session's lock file, alive or not; null if none or corrupt. */
export function readHolder(sessionPath: string, locksDir: string): LockHolder | null {
	return read(lockPathFor(sessionPath, locksDir))?.holder ?? null;
}

type State = "mine" | "live" | "busy" | "stale";

function classify(snap: Snapshot): State {
	const h = snap.holder;
	if (h === null) return snap.age < CORRUPT_GRACE ? "busy" : "stale";
	if (!isAlive(h)) return "stale";
	return h.pid === process.pid ? "mine" : "live";
}

/** Exclusive create of `dst` as a hard link to `src`: false when `dst` exists. */
function link(src: string, dst: string): boolean {
	try {
		fs.linkSync(src, dst);
		return true;
	} catch (e) {
		if (errCode(e) === "EEXIST") return false;
		throw e;
	}
}

function unlink(file: string): void {
	try {
		fs.unlinkSync(file);
	} catch (e) {
		if (errCode(e) !== "ENOENT") throw e;
	}
}

export class SessionLock {
	readonly session: string;
	readonly locksDir: string;
	readonly path: string;
	peer: string | null;
	private readonly onExit = (): void => {
		try {
			this.release();
		} catch {
			// exiting anyway: a lock we could not remove is stale once we are gone
		}
	};
	private exitHooked = false;

	constructor(sessionPath: string, locksDir: string, peer: string | null = null) {
		this.session = path.resolve(sessionPath);
		this.locksDir = path.resolve(locksDir);
		this.path = lockPathFor(this.session, this.locksDir);
		this.peer = peer;
	}

	/** Alias of `session`: the normalised (path.resolve) session path the lock is keyed by. */
	get sessionPath(): string {
		return this.session;
	}

	/** Take the lock without waiting; true when this process now holds it. */
	acquire(): boolean {
		const won = this.tryAcquire();
		if (won && !this.exitHooked) {
			process.on("exit", this.onExit);
			this.exitHooked = true;
		}
		return won;
	}

	/** Remove the lock file if it names this process; otherwise leave it alone. */
	release(): void {
		if (this.exitHooked) {
			process.removeListener("exit", this.onExit);
			this.exitHooked = false;
		}
		const snap = read(this.path);
		// Only we can replace a file naming us (we are alive, so it is not stale).
		if (snap !== null && classify(snap) === "mine") unlink(this.path);
	}

	/** The live holder (possibly this process), or null when free or stale. */
	holder(): LockHolder | null {
		const h = read(this.path)?.holder ?? null;
		return h !== null && isAlive(h) ? h : null;
	}

	/** True when this process holds the lock. */
	held(): boolean {
		const snap = read(this.path);
		return snap !== null && classify(snap) === "mine";
	}

	private record(): string {
		const p = proc(process.pid);
		if (p === null || p.startTime === null) throw new Error(`cannot read the start time of pid ${process.pid}`);
		return `${JSON.stringify({
			pid: process.pid,
			startTime: p.startTime,
			startTicks: p.startTicks,
			bootId: p.bootId,
			peer: this.peer,
			session: this.session,
			acquired: new Date().toISOString(),
			nonce: crypto.randomBytes(16).toString("hex"),
		})}\n`;
	}

	private writeTmp(): string {
		fs.mkdirSync(this.locksDir, { recursive: true, mode: 0o700 });
		const tmp = `${this.path}.tmp.${crypto.randomBytes(16).toString("hex")}`;
		const fd = fs.openSync(tmp, "wx", 0o600);
		try {
			fs.writeSync(fd, this.record());
		} catch (e) {
			fs.closeSync(fd);
			unlink(tmp);
			throw e;
		}
		fs.closeSync(fd);
		return tmp;
	}

	private tryAcquire(): boolean {
		let snap = read(this.path);
		if (snap !== null && classify(snap) === "mine") return true;
		const tmp = this.writeTmp();
		try {
			for (let round = 0; round < MAX_ROUNDS; round++) {
				if (link(tmp, this.path)) return true;
				snap = read(this.path);
				if (snap === null) continue; // released between our link and our read
				const state = classify(snap);
				if (state !== "stale") return state === "mine";
				const won = this.takeOver(tmp, snap.ident);
				if (won !== null) return won;
			}
			return false;
		} finally {
			unlink(tmp);
		}
	}

	private claimPath(ident: string, k: number): string {
		return `${this.path}.takeover.${ident}.${k}`;
	}

	/**
	 * Replace the stale incarnation `stale`: true won, false lost, null re-evaluate.
	 * Exclusive claims `<lock>.takeover.<stale>.<k>`: act once we hold claim k and every
	 * claimant of 0..k-1 is dead (docs/locks.md explains why this needs no timeouts).
	 */
	private takeOver(tmp: string, stale: string): boolean | null {
		const claims: string[] = [];
		try {
			let k = 0;
			let got = false;
			for (let i = 0; i < 2 * MAX_CLAIMS && k < MAX_CLAIMS; i++) {
				const claim = this.claimPath(stale, k);
				if (link(tmp, claim)) {
					claims.push(claim);
					got = true;
					break;
				}
				const other = read(claim);
				if (other === null) continue; // its claimant just finished: try this number again
				if (classify(other) !== "stale") return false; // a live process is taking over
				claims.push(claim); // dead claimant: removed below, after we acted
				k++;
			}
			if (!got) return false;
			const current = read(this.path);
			if (current === null || current.ident !== stale) return null;
			try {
				fs.unlinkSync(this.path);
			} catch (e) {
				if (errCode(e) === "ENOENT") return null;
				throw e;
			}
			if (!link(tmp, this.path)) return null; // a plain acquirer got in after our unlink
			this.sweep();
			return true;
		} finally {
			for (const claim of claims) unlink(claim);
		}
	}

	/** After a takeover: drop claims on vanished incarnations and old stray temp files. */
	private sweep(): void {
		const prefix = `${path.basename(this.path)}.`;
		let names: string[];
		try {
			names = fs.readdirSync(this.locksDir);
		} catch {
			return;
		}
		const now = Date.now() / 1000;
		for (const name of names) {
			if (!name.startsWith(prefix)) continue;
			const full = path.join(this.locksDir, name);
			const rest = name.slice(prefix.length);
			try {
				if (rest.startsWith("takeover.")) unlink(full);
				else if (rest.startsWith("tmp.") && now - fs.statSync(full).mtimeMs / 1000 > TMP_MAX_AGE) unlink(full);
			} catch {
				// best effort
			}
		}
	}
}
