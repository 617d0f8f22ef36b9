"""The pytester runs here are in-process: pytester removes the modules a run imported when it ends, but a
package imported before keeps its attribute pointing at the removed submodule, so a later run would mix old and
new module copies (two sets of pamqp classes: ``unexpected method in connection state starting``). Importing
everything a server imports lazily, once, before any run keeps every module in place."""

from fakerabbit import FakeRabbit

with FakeRabbit(management=True):
    pass
