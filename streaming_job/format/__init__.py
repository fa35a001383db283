"""The lake format's interface (land.format), and any lake read back: mirror rows, verify results, its state."""
