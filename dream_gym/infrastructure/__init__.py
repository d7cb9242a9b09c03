"""What every layer stands on: durable writes, locks, the kernel sandbox and isolated processes, job
pools, the LLM client, redaction, limits, work folders and printable text."""
