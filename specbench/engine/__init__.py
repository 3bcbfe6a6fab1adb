"""The speculative-decoding engine: drafters propose, the target verifies, caches roll back."""
