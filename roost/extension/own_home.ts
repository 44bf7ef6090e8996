/**
 * The roostd socket a foreground pi may talk to: in a ROOST_HOME of the user's alone.
 *
 * The twin of roost.host.trusted.home_problem and socket_problem (Python), which the CLI
 * applies before it sends anything: ROOST_HOME (symlinks resolved) owned by the user, it
 * and every folder above it owned by the user or root and writable by no one else unless
 * sticky (/tmp), and the socket a socket of the user's that no one else may write. Node
 * cannot ask the kernel who listens on a socket (SO_PEERCRED), so this is the file check
 * only; in a folder no one else controls, no one else can put a socket.
 */
import * as fs from "node:fs";
import * as path from "node:path";

const WRITABLE_BY_OTHERS = 0o022;
const STICKY = 0o1000;

/** `<home>/roostd.sock`, or an Error (one line) saying why it may not be used. */
export function ownSocket(home: string): string {
	const sock = path.join(home, "roostd.sock");
	const uid = process.getuid?.();
	if (uid === undefined) return sock; // not a POSIX system: nothing to compare
	let real: string;
	try {
		real = fs.realpathSync(home);
	} catch {
		return sock; // no ROOST_HOME yet: nothing answers there, roostd makes it
	}
	for (let dir = real; ; dir = path.dirname(dir)) {
		const st = fs.statSync(dir);
		const owner = dir === real ? st.uid === uid : st.uid === uid || st.uid === 0;
		const open = (st.mode & WRITABLE_BY_OTHERS) !== 0 && (st.mode & STICKY) === 0;
		if (!owner || open) {
			throw new Error(`ROOST_HOME ${home} is not yours alone: ${dir} is ` +
				(owner ? "writable by others" : `owned by uid ${st.uid}`) + ": refusing to use it");
		}
		if (dir === path.dirname(dir)) break;
	}
	let st: fs.Stats;
	try {
		st = fs.lstatSync(sock);
	} catch {
		return sock; // no socket: roostd is not running
	}
	if (!st.isSocket() || st.uid !== uid || (st.mode & WRITABLE_BY_OTHERS) !== 0) {
		throw new Error(`${sock} is not a socket of yours alone: refusing to use it`);
	}
	return sock;
}
