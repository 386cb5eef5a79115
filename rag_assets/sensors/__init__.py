"""Sensors: configured sources become partitions; changed sources get runs."""
