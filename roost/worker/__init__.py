"""The worker: one process per live job (pi jobs: roost.worker.worker; shell: .shell)."""
