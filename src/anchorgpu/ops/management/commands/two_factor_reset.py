import getpass

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from anchorgpu.accounts.two_factor import two_factor_reset


class Command(BaseCommand):
    help = ("Turn an operator's two-factor sign-in off when they lost both the app and the recovery codes "
            "(recorded in the audit log). They set it up again before they next use the admin.")

    def add_arguments(self, parser):
        parser.add_argument("username", help="the operator's user name (the e-mail, for accounts made in the shop)")
        parser.add_argument("--reason", required=True, help="why, for the audit log (e.g. 'phone lost, checked "
                                                            "by video call')")

    def handle(self, *args, **options):
        user = get_user_model()._default_manager.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user is named {options['username']!r}.")
        reason = options["reason"].strip()
        if not reason:
            raise CommandError("Give a reason with --reason; it goes into the audit log.")
        try:
            who = getpass.getuser()
        except (OSError, KeyError):  # no login name in this environment
            who = "unknown"
        actor = f"command line ({who})"[:150]
        if two_factor_reset(user=user, actor=actor, reason=reason):
            self.stdout.write(f"Two-factor sign-in is off for {user.get_username()}.")
        else:
            self.stdout.write(f"{user.get_username()} had no two-factor sign-in to turn off.")
