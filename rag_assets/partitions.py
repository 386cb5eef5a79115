"""One partition per configured source."""

from dagster import DynamicPartitionsDefinition

SOURCES_PARTITIONS_NAME = "sources"
sources_partitions = DynamicPartitionsDefinition(name=SOURCES_PARTITIONS_NAME)
