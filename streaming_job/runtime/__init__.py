"""The Spark process the job runs in: errors, workers' archive listings, driver threads, logs, versions."""
