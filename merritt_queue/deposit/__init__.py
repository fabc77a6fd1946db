"""What a depositor sends, read and checked at the door: manifests, containers, paths,
digests. No Django."""
