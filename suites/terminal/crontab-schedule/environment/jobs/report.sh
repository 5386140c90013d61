#!/bin/sh
echo report
