"""The declarative config file: models, loading and validation."""

from frazil.config.loader import load_config, parse_config
from frazil.config.models import CatalogConfig, FrazilConfig, KafkaConfig, SparkConfig
from frazil.config.pipeline import PipelineConfig

__all__ = [
    "CatalogConfig",
    "FrazilConfig",
    "KafkaConfig",
    "PipelineConfig",
    "SparkConfig",
    "load_config",
    "parse_config",
]
