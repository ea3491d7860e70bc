import pytest

from anchorgpu.orders.provisioning import PLAN, Step, next_step


def test_steps_run_in_order_and_resume_after_a_crash():
    assert next_step([]) is Step.ALLOCATE_DEVICES
    assert next_step(["allocate_devices", "prepare_environment"]) is Step.INSTALL_SSH_KEYS
    assert next_step(PLAN) is None
    assert [s.value for s in PLAN] == ["allocate_devices", "prepare_environment", "install_ssh_keys",
                                       "health_check", "deliver_access"]


def test_a_gap_in_the_record_is_an_error():
    with pytest.raises(ValueError, match="health_check finished before prepare_environment"):
        next_step(["allocate_devices", "health_check"])
