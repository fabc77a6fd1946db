import logging
import signal

import django_rq
from django.conf import settings
from django.core.management.base import BaseCommand

from ....core.dispatcher import Dispatcher, DispatcherConfig
from ....core.queues import all_queue_names
from ...periodic import ticker
from ...runtime import get_store
from ...tasks import TASKS, lane_rule


class Command(BaseCommand):
    help = "Watch ZooKeeper and keep the RQ queues filled (one per site). Workers: " + " ".join(
        all_queue_names()
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="sweep once and exit")

    def handle(self, *args, **opts):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        store = get_store()
        store.init()
        config = DispatcherConfig(
            ahead=settings.MQ_DISPATCH_AHEAD,
            sweep_interval=settings.MQ_SWEEP_SECONDS,
            started_grace=settings.MQ_STARTED_GRACE_SECONDS,
            workers=settings.MQ_WORKERS,
            tick_interval=settings.MQ_WINDOW_CHECK_SECONDS,
            lanes=lane_rule(),
        )
        redis = django_rq.get_connection("default")
        dispatcher = Dispatcher(store, redis, TASKS, config, on_tick=ticker(store))
        if opts["once"]:
            dispatcher.tick()
            self.stdout.write(f"enqueued {dispatcher.sweep()}")
            return

        # The handler only asks the loop to stop; the loop finishes its sweep first.
        def stop(*_) -> None:
            dispatcher.stop.set()
            dispatcher.wake.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"dispatching to {', '.join(all_queue_names())}")
        dispatcher.run()
        self.stdout.write(f"stopped after enqueueing {dispatcher.enqueued}")
