"""Webhooks (contract section 8): the change log POSTed to other services, judged as a role."""
