"""Built-in benchmark data (MMLU, GSM8K, HumanEval) read offline from installed registry packages."""
