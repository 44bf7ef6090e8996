"""The worker: one process per live job (pi jobs: roost.worker.lifecycle; shell: .shell)."""
