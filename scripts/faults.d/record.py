"""The run's shared record: what the load, the hostile requests and the probes saw."""
import threading
import time
from collections import Counter


class Record:
    def __init__(self):
        self.lock = threading.Lock()
        self.accepted = set()              # (account, report_id) answered 202
        self.statuses = Counter()          # (kind, status)
        self.unexpected = []               # descriptions of unexpected 5xx / hangs
        self.hostile_bad = []              # client mistakes answered wrongly (not 5xx)
        self.tolerated_503 = Counter()     # kind -> 503 with Retry-After
        self.connection_errors = Counter() # serve name -> errors while it was down on purpose
        self.gave_up = 0
        self.fault_windows = []            # (start, end) of database outages, end None while open
        self.requests = 0
        self.latencies = []
        self.first_ok_after_pg = None

    def db_fault_active(self, grace=15.0):
        now = time.time()
        for start, end in self.fault_windows:
            if start <= now and (end is None or now <= end + grace):
                return True
        return False

    def count(self, kind, status):
        with self.lock:
            self.statuses[(kind, status)] += 1

    def unexpected_answer(self, description):
        with self.lock:
            self.unexpected.append(description)
