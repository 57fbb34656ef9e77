"""Labels from runtimes, booster specs, training, saved models."""
