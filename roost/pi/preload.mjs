// Preloaded into each pi that roost starts (`node --import <this file> <pi's cli.js>`, see
// roost/pi/locate.py): pi's two code caches kept out of the temp folder every user of the
// machine shares, where another local user could make the folder first and put code in it
// (docs/security.md, door 1). Never throws: pi must start.
//
// 1. node's compile cache. pi 1.x turns it on itself (`module.enableCompileCache()`), which
//    without NODE_COMPILE_CACHE is $TMPDIR/node-compile-cache, made 0755 by whoever runs
//    node there first; V8 trusts the code cache it loads. Turned on here first, in
//    `${XDG_CACHE_HOME:-~/.cache}/roost/node-compile-cache`, pi's own call finds it on and
//    keeps it. Nothing goes into the environment, so the node programs the agent's tools
//    run behave as without roost. The old line (0.73.1) gets the cache too on node >= 22.1.
//    Left alone when the person chose (NODE_COMPILE_CACHE, NODE_DISABLE_COMPILE_CACHE),
//    on a node without one (20), and when the folder cannot be made private (a symlink,
//    another user's): pi then does what it does without roost.
//
// 2. jiti's cache, through which pi loads extensions (roost's among them): the compiled
//    JavaScript in $TMPDIR/jiti, run as found when its last line names the source's hash.
//    jiti's folder can only be turned off, by the environment (JITI_FS_CACHE=false). So it
//    is made here as jiti would make it (0755, this user's) when nobody has, and turned off
//    only when $TMPDIR/jiti is not this user's or others may write it: then the agent's
//    tools inherit the switch, and their jiti stays out of that folder too.
import fs from "node:fs";
import module from "node:module";
import os from "node:os";
import path from "node:path";

function cacheRoot() {
  const xdg = process.env.XDG_CACHE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), ".cache");
  return path.join(base, "roost");
}

// The folder when it is this user's alone (a real directory, theirs, no one else may
// write it), made so when it is absent; null otherwise.
function privateFolder(folder) {
  fs.mkdirSync(folder, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(folder);
  if (!st.isDirectory() || st.uid !== process.getuid()) return null;
  if ((st.mode & 0o077) !== 0) fs.chmodSync(folder, 0o700);
  return folder;
}

function compileCache() {
  if (typeof module.enableCompileCache !== "function") return;
  if (process.env.NODE_COMPILE_CACHE || process.env.NODE_DISABLE_COMPILE_CACHE) return;
  try {
    const root = privateFolder(cacheRoot());
    if (root !== null) module.enableCompileCache(path.join(root, "node-compile-cache"));
  } catch {
    // a home that cannot be written: pi runs as it would without roost
  }
}

function jitiCache() {
  if ("JITI_FS_CACHE" in process.env || "JITI_CACHE" in process.env) return; // the person's
  const folder = path.join(os.tmpdir(), "jiti");
  try {
    try {
      fs.mkdirSync(folder, { mode: 0o755 }); // as jiti makes it: first come
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
    }
    const st = fs.lstatSync(folder);
    if (st.isDirectory() && st.uid === process.getuid() && (st.mode & 0o022) === 0) return;
  } catch {
    // a temp folder that cannot be written: jiti finds that out and caches nothing
    return;
  }
  process.env.JITI_FS_CACHE = "false";
}

compileCache();
jitiCache();
