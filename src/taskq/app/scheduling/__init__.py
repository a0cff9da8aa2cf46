"""Recurring jobs: ``@cron`` schedules, their ticks, and the leader's loop that enqueues them."""
