"""Graph build, per access level: extraction -> assembly -> resolution -> summaries -> communities -> reports. `runner` does the I/O around the pure stages."""
