"""The CLI's print layer: the one output layer, the job table and details, fitted to a width."""
