"""How rounds are strung together beyond the plain loop: verify-length schedules, nested speculation, online adaptation of the drafter."""
