"""torch.backends of the stand-in."""


class cudnn:
    @staticmethod
    def version():
        return 91900

    @staticmethod
    def is_available():
        return True
