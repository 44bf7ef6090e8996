"""The worker: one process per live job (pi jobs: roost.worker.main; shell: .shell)."""
