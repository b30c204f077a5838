"""The download bot's queue: ``DownloadQueue`` implements ``IDownloadQueue`` on conveyor."""

from examples.download_queue.queue import (
    DownloadJob,
    DownloadQueue,
    IDownloadQueue,
    JobAlreadyProcessed,
    JobStatus,
    QueueStats,
)

__all__ = [
    "DownloadJob",
    "DownloadQueue",
    "IDownloadQueue",
    "JobAlreadyProcessed",
    "JobStatus",
    "QueueStats",
]
