# Debian's gems are on Ruby's load path: no Bundler.
