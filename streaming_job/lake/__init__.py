"""The lake's storage: paths, object stores, files, the job's lease, a Delta log, the change logs' generations."""
