#!/bin/sh
# PySpark 4 runs on Java 17 or newer; say so plainly instead of letting Spark fail obscurely.
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=$(command -v java || true); fi
if [ -z "$JAVA" ]; then
  echo "error: Java 17+ is required by Spark but 'java' was not found. Install it (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME." >&2
  exit 1
fi
major=$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n 1)
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
  echo "error: Java 17+ is required by Spark, found '$("$JAVA" -version 2>&1 | head -n 1)' at $JAVA. Install openjdk-17 or set JAVA_HOME." >&2
  exit 1
fi
